"""Index builds: `madr build-index` and `madr build-sparse-index`.

`partitioned` builds an index of `--num_index_shards` hash-partitioned shards (one by default, built
in-process on the local runner, else in Beam; `shard_build` builds each) and `manifest` writes their
manifest; `sparse` builds UHD-BERT's inverted indexes. The index artifacts themselves are `index_builder`'s.

The package imports none of its modules: a command imports the one it runs (`jobs.command_table`).
"""
