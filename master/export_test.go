package master

// PutLegacyFramework writes a framework record as stores written before
// principals were persisted hold it (a bare list of roles).
func PutLegacyFramework(s *BoltStore, id string, roles []string) error {
	return s.put(bucketFrameworks, id, roles)
}

// PutLegacyAgent writes an agent record as stores written before
// principals were persisted hold it (the bare hostname).
func PutLegacyAgent(s *BoltStore, id, hostname string) error {
	return s.put(bucketAgents, id, hostname)
}
