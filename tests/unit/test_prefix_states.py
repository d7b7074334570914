"""Which KV snapshot is restored, and when: the choice, without llama.cpp."""

from __future__ import annotations

import numpy as np

from nemori_cli.llm.prefix_states import MIN_GAIN_CHARS, PrefixStates, Snapshot, prompt_key


class FakeLlama:
    def __init__(self):
        self._ctx = object()
        self.input_ids = np.zeros(64, dtype=np.intc)
        self.n_tokens = 0


class Recorded(PrefixStates):
    """Snapshots hold their key; restoring records which one."""

    def __init__(self, **kw):
        super().__init__(FakeLlama(), **kw)
        self.enabled = True
        self.restored: list[str] = []

    def _capture(self, key):
        return Snapshot(key, np.arange(3, dtype=np.intc), b"x" * 10)

    def _restore(self, snapshot):
        self.restored.append(snapshot.key)


SYSTEM_A = "a" * 200
SYSTEM_B = "b" * 200


def test_the_snapshot_sharing_most_is_restored_when_it_beats_what_is_live():
    states = Recorded()
    states.after(SYSTEM_A + "first")
    states.after(SYSTEM_B + "second")  # live now
    states.before(SYSTEM_A + "third")
    assert states.restored == [SYSTEM_A + "first"] and states.live_key == SYSTEM_A + "first"


def test_nothing_is_restored_when_the_live_state_already_shares_as_much():
    states = Recorded()
    states.after(SYSTEM_A + "first")
    states.before(SYSTEM_A + "second")
    assert states.restored == []


def test_a_small_gain_is_not_worth_a_copy():
    states = Recorded()
    states.after("x" * (MIN_GAIN_CHARS - 1) + "1")
    states.after("y" * 300)
    states.before("x" * (MIN_GAIN_CHARS - 1) + "2")
    assert states.restored == []


def test_least_recently_used_snapshots_are_evicted_and_prefixes_are_dropped():
    states = Recorded(slots=2)
    states.after(SYSTEM_A)
    states.after(SYSTEM_A + " and more")  # serves everything the first one would
    assert list(states.snapshots) == [SYSTEM_A + " and more"]
    states.after(SYSTEM_B)
    states.after("c" * 200)
    assert list(states.snapshots) == [SYSTEM_B, "c" * 200]


def test_a_broken_call_leaves_nothing_live_and_a_failing_api_turns_the_cache_off():
    states = Recorded()
    states.after(SYSTEM_A + "first")
    states.failed()
    assert states.live_key == ""

    class Broken(Recorded):
        def _restore(self, snapshot):
            raise RuntimeError("no such API")

        def _reset(self):
            pass

    broken = Broken()
    broken.after(SYSTEM_A + "first")
    broken.after(SYSTEM_B)
    broken.before(SYSTEM_A + "again")
    assert broken.enabled is False and broken.live_key == ""


def test_keys_follow_the_messages_in_order():
    a = prompt_key([{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}])
    b = prompt_key([{"role": "system", "content": "S"}, {"role": "user", "content": "U2"}])
    assert a != b and a[:-1] == b[:-1]
