// Package masteraddr is how clients of a highly available master follow
// its leader: the comma-separated --master list (Parse), the gRPC status
// a standby answers with, naming the leader (NotLeader, Leader), the
// choice of the address to try next (Set), the masters' discovery asked
// again (Rediscover), and the watch of who leads through another master
// (WatchLeader over the Masters service, Leaders), which ends a session
// with a leader that stopped answering once another is elected
// (LeaderMovedError). Its one sentinel is ErrClosed.
package masteraddr
