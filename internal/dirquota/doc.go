// Package dirquota limits and measures what is written below a
// directory: an image container's upper dir. Where the directory's file
// system is xfs mounted with project quotas enforced (prjquota), a
// project ID with PROJINHERIT on the directories and a hard block limit
// make the kernel refuse writes beyond the limit (EDQUOT); elsewhere
// Usage sums the blocks below the directory (du -s) for a caller that
// enforces the limit itself.
//
// It never removes files and never logs. Sentinel: ErrNotSupported (not
// Linux, or a file system without enforced project quotas: Open).
package dirquota
