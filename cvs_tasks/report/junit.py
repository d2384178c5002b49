"""junit.xml for CI: one testcase per results.json test row, derived from that object only.

A failure carries a short message (the row's reason) and, as text, the violated metrics and the
path of the log to read, so a CI page points straight at the evidence. A NOT-RUN row is an error
when the run asked for it (interrupted, killed, stopped by ``--exitfirst``) and ``skipped`` with its
reason when no command of the run asked for it: the suite's counts agree with the verdict.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping

from cvs_tasks.report.first_failure import error_where
from cvs_tasks.report.formatting import bound_text, fmt_number, plain_text, short_metric

# Characters XML 1.0 forbids (control characters other than tab/newline/CR, surrogates, U+FFFE/F).
_ILLEGAL_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: Any) -> str:
    """Text with characters illegal in XML 1.0 removed (log tails carry ANSI escapes and NULs)."""
    return _ILLEGAL_XML.sub("", "" if text is None else str(text))


def junit_xml(results: Mapping[str, Any]) -> bytes:
    """The JUnit XML document (UTF-8 bytes with declaration) for a results.json object."""
    tests = results.get("tests", [])
    counts = results.get("counts", {})
    suite_name = f"cvs-tasks {results.get('suite') or 'unknown'} {results.get('backend') or 'unknown'}"
    total_time = sum(t.get("duration_s") or 0.0 for t in tests)
    not_asked = sum(1 for t in tests if not_asked_row(t))
    attrs = {
        "name": suite_name,
        "tests": str(len(tests)),
        "failures": str(counts.get("FAIL", 0)),
        "errors": str(counts.get("ERROR", 0) + counts.get("NOT-RUN", 0) - not_asked),
        "skipped": str(counts.get("SKIPPED", 0) + not_asked),
        "time": f"{total_time:.3f}",
    }
    root = ET.Element("testsuites", {k: v for k, v in attrs.items() if k != "skipped"})
    suite = ET.SubElement(root, "testsuite", {**attrs, "id": "0"})
    _properties(suite, results)
    for test in tests:
        _testcase(suite, test)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _properties(suite: ET.Element, results: Mapping[str, Any]) -> None:
    props = ET.SubElement(suite, "properties")
    for key in ("run_id", "verdict", "verdict_reason", "image", "gpu_name", "model_name", "incomplete"):
        value = results.get(key)
        if value is not None:
            ET.SubElement(props, "property", {"name": key, "value": xml_safe(value)})
    hosts = results.get("hosts")
    if isinstance(hosts, list) and hosts:
        ET.SubElement(props, "property", {"name": "hosts", "value": xml_safe(",".join(map(str, hosts)))})


def _testcase(suite: ET.Element, test: Mapping[str, Any]) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        {
            "classname": f"cvs.{test.get('stage', 'unknown')}",
            "name": xml_safe(test.get("name", "")),
            "time": f"{test.get('duration_s') or 0.0:.3f}",
        },
    )
    status = test.get("status")
    reason = xml_safe(test.get("reason") or status)
    if status == "FAIL":
        ET.SubElement(case, "failure", {"message": reason, "type": "GateFailed"}).text = failure_text(test)
    elif status == "ERROR":
        ET.SubElement(case, "error", {"message": reason, "type": "Error"}).text = failure_text(test)
    elif not_asked_row(test):  # no command of the run asked for it: not a failure of what was asked
        ET.SubElement(case, "skipped", {"message": reason})
    elif status == "NOT-RUN":  # asked and never ran: not a pass, and not a rule-based skip either
        ET.SubElement(case, "error", {"message": reason, "type": "NotRun"})
    elif status == "SKIPPED":
        ET.SubElement(case, "skipped", {"message": reason})


def not_asked_row(test: Mapping[str, Any]) -> bool:
    return test.get("status") == "NOT-RUN" and test.get("asked") is False


def failure_text(test: Mapping[str, Any]) -> str:
    """Violated metrics, the error signature and the log paths of a failed row, one per line."""
    lines = []
    for m in test.get("metrics", []):
        if m.get("status") == "FAIL":
            lines.append(
                f"{short_metric(str(m.get('name')))}: {fmt_number(m.get('value'))} {m.get('unit') or ''}".rstrip()
                + f" (expected {bound_text(m.get('expected'), m.get('unit') or '')})"
                + (f": {m['reason']}" if m.get("reason") else "")
            )
    error = test.get("details", {}).get("error") or {}
    if error:
        where = f" on {error_where(error)}" if error.get("host") is not None else ""
        lines.append(f"error {error.get('name')}{where}: {plain_text(error.get('text'))}".rstrip(": "))
    for log in test.get("logs", []):
        if log.get("exists"):
            lines.append(f"log: {log.get('path')}")
    return xml_safe("\n".join(lines) or test.get("reason") or "")
