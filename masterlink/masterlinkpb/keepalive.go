package masterlinkpb

import "time"

// Keepalive figures every client of a master uses (agents through
// masterlink, frameworks through the scheduler SDK): a ping after
// KeepaliveTime without traffic, the link declared dead when no answer
// comes within KeepaliveTimeout. The master's enforcement policy admits
// them (its MinTime is below KeepaliveTime).
const (
	KeepaliveTime    = 10 * time.Second // gRPC's floor for client pings
	KeepaliveTimeout = 5 * time.Second
)
