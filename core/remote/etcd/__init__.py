"""etcd's concurrency-API locks, as ``etcdctl lock`` writes them (docs/remote.md)."""
