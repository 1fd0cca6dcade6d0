"""Loop fusion: exact slices, producer-consumer and sibling fusion, buffer
shrinking, a cost model and the greedy policy (mechanism apart from policy).

* ``producer_consumer.fuse_into``: one fusion at a depth, proved by the
  value-based equivalence check (``polyir.polyhedral.equivalence``);
* ``sibling.fuse_siblings``: input-reuse fusion, proved by ``check_rewrite``;
* ``privatize.shrink_buffer(s)``: intermediates contracted to loop-scoped locals;
* ``cost``: traffic saved, work repeated, working set; ``policy``: the greedy plan;
* ``passes``: ``fuse``, ``fuse-nests``, ``shrink-buffers``.
"""
