"""Token cost and the running counters of one client."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


def cost_usd(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float:
    """USD for the tokens at `price` = (prompt, completion) per 1k tokens; 0.0 when the price is unknown."""
    if price is None:
        return 0.0
    return prompt_tokens / 1000 * price[0] + completion_tokens / 1000 * price[1]


@dataclass
class UsageCounters:
    calls: int = 0  # chat() calls, cached or not
    requests: int = 0  # HTTP requests sent: retries and repair requests included
    cache_hits: int = 0
    prompt_tokens: int = 0  # spent by this client; cached replies add nothing
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: int = 0  # calls that returned with LLMCall.error set
    unpriced_calls: int = 0  # uncached calls to a model missing from the price table (costed at 0.0)
    missing_usage: int = 0  # replies without a `usage` object (their tokens count as 0)


class UsageRecorder:
    """UsageCounters behind a lock: chat_many updates them from several threads."""

    def __init__(self) -> None:
        self._counters = UsageCounters()
        self._lock = threading.Lock()

    def add(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self._counters, name, getattr(self._counters, name) + delta)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return asdict(self._counters)
