// Package masteraddr is how clients of a highly available master follow
// its leader: the comma-separated --master list (Parse), the gRPC status
// a standby answers with, naming the leader (NotLeader, Leader), and the
// choice of the address to try next (Set).
package masteraddr
