package master

import "github.com/brimnode/brim/resources"

// StoredReservations are the reservations the master keeps for agent,
// registered or not (State shows those of registered agents).
func (m *Master) StoredReservations(agent string) resources.Resources {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reservations[agent]
}
