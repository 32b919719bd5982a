"""preflab.scale: the quality statistics and the unary (KTO) export beyond one machine.

Labels as Parquet shards (:mod:`.shards`), the mergeable statistics of
:mod:`preflab.quality.mergeable` run shard by shard in-process or on a Dask cluster
(:mod:`.engine`, :mod:`.stats`), the distributed unary export (:mod:`.export`) and the
``preflab scale`` commands (:mod:`.cli`). docs/scale.md.
"""
