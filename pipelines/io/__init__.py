"""Records in and out of the stages: a catalog read and validated in Beam (`catalog_io`) or in-process
(`product_reader`), Parquet shards read back (`parquet_reading`) and written (`parquet_shards`), and
query text files (`texts`)."""
