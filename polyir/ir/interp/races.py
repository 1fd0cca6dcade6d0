"""Data-race detection for interpreted GPU code (``interpret(..., detect_races=True)``).

Generated thread code logs every access to a buffer that is not private to
the thread as ``(node, buffer, flat offset, is_write, is_global)``. Two
accesses race when different threads touch the same element, at least one
writes, and no barrier separates them:

* within a block, accesses are compared phase by phase (between barriers);
* across blocks, accesses to global memory are compared for the whole launch
  (blocks are unordered and never synchronise).

Fragment loads and stores are logged as accesses of the warp's first lane.
Running threads serially hides read-modify-write races such as every thread
doing ``count[0] = count[0] + 1`` (each order gives the same sum); this
check reports them.
"""
from __future__ import annotations

from typing import Any

Entry = tuple[int, str, int, int, int]


class RaceChecker:
    """Collects the accesses of one launch and raises on the first race."""

    def __init__(self, rt: Any, node: int):
        self.rt = rt
        self.node = node
        # (buffer, offset) -> (block, thread, is_write, statement) of a global access
        self.global_accesses: dict[tuple[str, int], tuple[Any, Any, int, int]] = {}

    def check_phase(self, bid: tuple[int, int, int], tids: list[Any], logs: list[list[Entry]]) -> None:
        """Compare one phase of one block; clears the logs."""
        seen: dict[tuple[str, int], tuple[int, int, int]] = {}   # first access: (thread, write, node)
        writer: dict[tuple[str, int], tuple[int, int]] = {}       # first write: (thread, node)
        for lin, log in enumerate(logs):
            for k, name, offset, write, is_global in log:
                key = (name, offset)
                first = seen.get(key)
                if first is None:
                    seen[key] = (lin, write, k)
                else:
                    other = writer.get(key)
                    if first[0] != lin and (write or first[1]):
                        self.report(bid, tids, key, (first[0], first[1], first[2]), (lin, write, k))
                    if other is not None and other[0] != lin:
                        self.report(bid, tids, key, (other[0], 1, other[1]), (lin, write, k))
                if write and key not in writer:
                    writer[key] = (lin, k)
                if is_global:
                    self.global_access(bid, tids[lin], key, write, k)
            log.clear()

    def global_access(self, bid: Any, tid: Any, key: tuple[str, int], write: int, k: int) -> None:
        previous = self.global_accesses.get(key)
        if previous is None or (write and not previous[2]):
            if previous is not None and previous[0] != bid:
                self.report_blocks(key, previous, (bid, tid, write, k))
            self.global_accesses[key] = (bid, tid, write, k)
            return
        if previous[0] != bid and (write or previous[2]):
            self.report_blocks(key, previous, (bid, tid, write, k))

    def report(self, bid: Any, tids: list[Any], key: tuple[str, int], a: tuple[int, int, int],
               b: tuple[int, int, int]) -> None:
        describe = self.rt.describe
        verb = ("reads", "writes")
        raise self.rt.error(self.node, f"data race in block {bid}: thread {tids[a[0]]} {verb[a[1]]} "
                                       f"'{key[0]}' at flat offset {key[1]} ({describe(a[2])}) and thread "
                                       f"{tids[b[0]]} {verb[b[1]]} it ({describe(b[2])}) with no barrier "
                                       f"in between")

    def report_blocks(self, key: tuple[str, int], a: tuple[Any, Any, int, int],
                      b: tuple[Any, Any, int, int]) -> None:
        describe = self.rt.describe
        verb = ("reads", "writes")
        raise self.rt.error(self.node, f"data race between blocks: block {a[0]} thread {a[1]} {verb[a[2]]} "
                                       f"'{key[0]}' at flat offset {key[1]} ({describe(a[3])}) and block "
                                       f"{b[0]} thread {b[1]} {verb[b[2]]} it ({describe(b[3])})")


def tile_entries(k: int, name: str, offsets: Any, write: bool, is_global: bool) -> list[Entry]:
    """Log entries for a fragment tile access (``offsets``: flat element offsets)."""
    return [(k, name, int(o), int(write), int(is_global)) for o in offsets.ravel()]
