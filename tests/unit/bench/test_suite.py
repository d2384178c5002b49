import io
import json

import pytest

from benchmarks import suite
from cvs_tasks.errors import BadInput


def test_only_selects_in_suite_order_and_rejects_unknown_names():
    assert suite.selected(None) == list(suite.DEFAULT_NAMES)
    assert "scale" in suite.NAMES and "scale" not in suite.DEFAULT_NAMES
    assert suite.selected("report, parse") == ["parse", "report"]
    with pytest.raises(BadInput, match="nope"):
        suite.selected("report,nope")


def test_report_only_run_prints_json_and_a_table_with_brackets_intact(capsys):
    assert suite.main(["--only", "report", "--quick"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["quick"] is True and result["benchmarks"]["report"]["error"] is None
    assert [r["name"] for r in result["rows"]] == ["report.render_s[64x16]", "report.render_vs_plain_read[64x16]"]
    assert "report.render_s[64x16]" in err  # rich markup must not eat the [..] part


def test_table_escapes_markup_in_details():
    stream = io.StringIO()
    rows = [{"name": "x[local]", "value": None, "unit": "s", "target": "<= 3", "status": "MISS",
             "detail": "[rank7]: oom"}]
    suite.print_table({"rows": rows, "duration_s": 1.0, "quick": True, "summary": {"PASS": 0, "MISS": 1}}, stream)
    text = stream.getvalue()
    assert "x[local]" in text and "[rank7]" in text
