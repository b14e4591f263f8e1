"""The metadata quorum: a ZooKeeper-style znode tree replicated by a pysyncobj Raft quorum."""
