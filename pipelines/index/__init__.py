"""Index builds: `madr build-index` and `madr build-sparse-index`.

`single` trains one ScaNN index on the driver; `partitioned` builds hash-partitioned shards in
Beam (`--num_index_shards` > 1) and `manifest` writes their manifest; `sparse` builds UHD-BERT's
inverted indexes. The index artifacts themselves are `index_builder`'s.

The package imports none of its modules: a command imports the one it runs (`jobs.command_table`).
"""
