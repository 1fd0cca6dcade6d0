"""Loop-nest restructuring for locality: distribution (``distribute``) and,
as the tiling issue lands, tiling, interchange, unroll-and-jam, scratchpad
copies and packing. Mechanism (these modules) is apart from policy
(``sizes.py``, ``levels.py``)."""
