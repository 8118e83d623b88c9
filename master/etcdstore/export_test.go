package etcdstore

import "github.com/brimnode/brim/master"

// AddToCopy adds a record under the registry prefix to the standby's
// copy term t has not loaded yet, as if the copy had missed its
// deletion; false if t has no copy.
func AddToCopy(t master.Term, key, value string) bool {
	tm := t.(*Term)
	tm.copyMu.Lock()
	defer tm.copyMu.Unlock()
	m := tm.copied
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev == 0 {
		return false
	}
	m.kvs[tm.c.registryPrefix()+key] = []byte(value)
	return true
}
