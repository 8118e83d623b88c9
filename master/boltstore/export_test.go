package boltstore

import "encoding/json"

// PutLegacyFramework writes a framework record as stores written before
// principals were persisted hold it (a bare list of roles).
func PutLegacyFramework(s *Store, id string, roles []string) error {
	v, err := json.Marshal(roles)
	if err != nil {
		return err
	}
	return s.put("frameworks", id, v, true)
}

// PutLegacyAgent writes an agent record as stores written before
// principals were persisted hold it (the bare hostname).
func PutLegacyAgent(s *Store, id, hostname string) error {
	v, err := json.Marshal(hostname)
	if err != nil {
		return err
	}
	return s.put("agents", id, v, true)
}
