"""Bounded, visible retries for infrastructure steps (SSH connect, image pull, docker rm).

Never wrap a training run in this: a run that finished and failed a gate is a result, not a
flake. Every failed attempt is recorded so the caller can store it with the stage record.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` tries; the wait grows from ``first_delay`` by ``factor`` up to ``max_delay``."""

    attempts: int = 3
    first_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retry attempts must be >= 1, got {self.attempts}")
        if self.first_delay < 0 or self.factor < 1 or self.max_delay < 0:
            raise ValueError("retry delays must be >= 0 and the factor >= 1")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_delay, self.first_delay * self.factor ** (attempt - 1))


NO_RETRY = RetryPolicy(attempts=1)


@dataclass(frozen=True)
class Attempt:
    """One failed try: which step, which attempt, why, and how long it took."""

    step: str
    attempt: int
    error: str
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def retry_call(
    step: str,
    call: Callable[[], T],
    failure: Callable[[T], str | None],
    policy: RetryPolicy,
    record: list[Attempt],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call until ``failure(result)`` is None or the attempts run out; return the last result.

    ``failure`` returns the reason an attempt failed, or None when it is good (or when the
    failure is one that retrying cannot fix, such as a rejected host key).
    """
    result: T
    for attempt in range(1, policy.attempts + 1):
        started = clock()
        result = call()
        reason = failure(result)
        if reason is None:
            return result
        record.append(Attempt(step, attempt, reason, round(clock() - started, 3)))
        if attempt < policy.attempts:
            sleep(policy.delay(attempt))
    return result
