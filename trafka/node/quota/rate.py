"""The rate a quota bounds, and how long a client over it is throttled.

Kafka's `Rate` on a `SampledStat` (sum), as its client quota sensors use it
(`ClientQuotaManager`, `quota.window.num` = 11 samples of `quota.window.size.seconds` = 1):

* a sample covers `window_size_ms` from its start; recording when the current sample is
  complete starts the next one, overwriting the oldest once there are `samples`;
* samples started `samples * window_size_ms` ago or earlier are obsolete and reset;
* rate = sum of the live samples / window, where window = now - start of the oldest live
  sample, at least one window (Kafka's `SimpleRate`, which its replication quotas use).

  Deliberate deviation: Kafka's client quota sensors use `Rate`, whose window is padded
  with whole sample windows up to `samples - 1` of them (`Rate.windowSize`). That lets a new
  client send ten seconds' worth at once, and, since the padding also applies whenever the
  oldest live sample started less than ten windows ago (every time the ring turns), it
  under-measures by up to one window in ten: a client that sends as soon as its throttle
  ends gets ~10% more than its quota, steadily (`tests/node/test_quotas.py` simulates
  both). With the unpadded window the same client gets its quota within 1%, from the first
  second; the throttle formula is Kafka's.
* throttle (`QuotaUtils.throttleTime`): (rate - bound) / bound * window, in ms: how long
  the client must stay silent for the rate over the grown window to fall back to the
  bound; bounded by the caller (`ClientRequestQuotaManager`: one window).

Pure: every call takes `now_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

DEFAULT_WINDOW_NUM: Final = 11
DEFAULT_WINDOW_SIZE_MS: Final = 1000


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass(slots=True)
class Rate:
    """The sampled sum and its per-second rate (also the replication throttles', KIP-73)."""

    samples: int = DEFAULT_WINDOW_NUM
    window_size_ms: int = DEFAULT_WINDOW_SIZE_MS
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
            self._current = 0
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_size_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        expire_age_ms = self.samples * self.window_size_ms
        for index, sample in enumerate(self._samples):
            if now_ms - sample.start_ms >= expire_age_ms:
                self._samples[index] = _Sample(now_ms)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.value for sample in self._samples)

    def window_ms(self, now_ms: int) -> int:
        """max(now - start of the oldest live sample, one window) (`SimpleRate.windowSize`)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(now_ms - oldest, self.window_size_ms)

    def per_second(self, now_ms: int) -> float:
        window = self.window_ms(now_ms)
        return self.total(now_ms) * 1000.0 / window if window > 0 else 0.0


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's `QuotaUtils.throttleTime`: 0 unless `rate` is above `bound`."""
    if bound <= 0:
        return window_ms if rate > 0 else 0
    if rate <= bound:
        return 0
    return round((rate - bound) / bound * window_ms)


@dataclass(slots=True)
class QuotaSensor:
    """One rate with its bound: `record` returns the throttle time (0 when within)."""

    bound: float
    rate: Rate

    def record(self, value: float, now_ms: int, *, max_throttle_ms: int | None = None) -> int:
        self.rate.record(value, now_ms)
        throttle = throttle_time_ms(
            self.rate.per_second(now_ms), self.bound, self.rate.window_ms(now_ms)
        )
        return throttle if max_throttle_ms is None else min(throttle, max_throttle_ms)

    def check_and_record(self, value: float, now_ms: int, *, max_throttle_ms: int) -> int:
        """Record; if that puts the rate over the bound, take it back and return the throttle
        time (Kafka's connection-rate quota: a refused connection is not counted)."""
        throttle = self.record(value, now_ms, max_throttle_ms=max_throttle_ms)
        if throttle > 0:
            self.rate.record(-value, now_ms)
        return throttle


@dataclass(slots=True)
class TokenBucket:
    """Kafka's `TokenBucket` stat (KIP-599), the controller mutation quota's measure.

    Tokens are partitions; the bucket holds at most `burst` = rate * samples * window
    seconds (Kafka's `quota.window.num` x `quota.window.size.seconds`, 11 s by default) and
    starts full; it refills at `rate` tokens per second; a mutation takes its partitions even
    when that drives the count below zero (one large request is allowed). The quota is
    violated while the count is below zero; the throttle time is how long the refill takes to
    bring it back to zero (Kafka's `ControllerMutationQuotaManager.throttleTimeMs`:
    -tokens / rate, in ms).
    """

    rate: float
    samples: int = DEFAULT_WINDOW_NUM
    window_size_ms: int = DEFAULT_WINDOW_SIZE_MS
    tokens: float | None = None
    """None until the first use (then full)."""
    last_update_ms: int = 0

    @property
    def burst(self) -> float:
        return max(self.rate, 0.0) * self.samples * self.window_size_ms / 1000.0

    def _refill(self, now_ms: int) -> float:
        burst = self.burst
        if self.tokens is None:
            tokens = burst
        else:
            elapsed_ms = max(now_ms - self.last_update_ms, 0)
            tokens = min(burst, self.tokens + max(self.rate, 0.0) * elapsed_ms / 1000.0)
        self.tokens = tokens
        self.last_update_ms = max(now_ms, self.last_update_ms)
        return tokens

    def available(self, now_ms: int) -> float:
        return self._refill(now_ms)

    def record(self, permits: float, now_ms: int) -> None:
        self.tokens = min(self.burst, self._refill(now_ms) - permits)

    def throttle_time_ms(self, now_ms: int) -> int:
        """0 while the count is not below zero; else the ms until it is back at zero (a
        rate of 0 never refills: one whole quota window, `samples * window_size_ms`)."""
        tokens = self._refill(now_ms)
        if tokens >= 0:
            return 0
        if self.rate <= 0:
            return self.samples * self.window_size_ms
        return min(round(-tokens / self.rate * 1000), _MAX_THROTTLE_MS)


_MAX_THROTTLE_MS: Final = 2**31 - 1
