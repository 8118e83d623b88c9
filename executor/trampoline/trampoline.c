//go:build linux && cgo

// The exec trampoline of a warm sandbox (see doc.go). Runs as a
// constructor, before the Go runtime, only when _BRIM_TRAMPOLINE is set.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAGIC "BRT1"
#define MAX_MSG (8 << 20)
#define MAX_GROUPS 65536

static int status_fd = -1;

// fail reports "kind\tmessage\n" on the status pipe and exits.
static void fail(const char *kind, const char *fmt, ...)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s\t", kind);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && n < (int)sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (status_fd >= 0) {
		ssize_t w = write(status_fd, buf, n);
		(void)w;
	}
	_exit(127);
}

// reader walks the message.
struct reader {
	const char *p, *end;
};

static uint32_t get32(struct reader *r)
{
	uint32_t v;
	if (r->end - r->p < 4)
		fail("error", "trampoline message truncated");
	memcpy(&v, r->p, 4);
	r->p += 4;
	return v;
}

static uint64_t get64(struct reader *r)
{
	uint64_t v;
	if (r->end - r->p < 8)
		fail("error", "trampoline message truncated");
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

static char *getstr(struct reader *r)
{
	const char *nul = memchr(r->p, 0, r->end - r->p);
	if (!nul)
		fail("error", "trampoline message truncated");
	char *s = (char *)r->p;
	r->p = nul + 1;
	return s;
}

static char *read_all(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		fail("error", "trampoline: out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= MAX_MSG)
				fail("error", "trampoline message over %d bytes", MAX_MSG);
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				fail("error", "trampoline: out of memory");
		}
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			fail("error", "read trampoline message: %s", strerror(errno));
		if (k == 0)
			break;
		n += k;
	}
	*len = n;
	return buf;
}

// executable is Go's os/exec findExecutable: 0 or an errno.
static int executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (syscall(SYS_faccessat2, AT_FDCWD, path, X_OK, AT_EACCESS) == 0)
		return 0;
	if (errno != ENOSYS && errno != EPERM)
		return errno;
	return (st.st_mode & 0111) ? 0 : EACCES;
}

// lookpath is Go's exec.LookPath on PATH (libcontainer's init runs it as
// the user, after the user and capabilities are set).
static char *lookpath(const char *file, const char *path)
{
	if (strchr(file, '/')) {
		int err = executable(file);
		if (err)
			fail("notfound", "exec: \"%s\": stat %s: %s", file, file, strerror(err));
		return (char *)file;
	}
	const char *dir = path;
	for (;;) {
		const char *colon = strchr(dir, ':');
		size_t dl = colon ? (size_t)(colon - dir) : strlen(dir);
		char cand[PATH_MAX];
		int n = dl == 0 ? snprintf(cand, sizeof(cand), "./%s", file)
				: snprintf(cand, sizeof(cand), "%.*s/%s", (int)dl, dir, file);
		if (n > 0 && n < (int)sizeof(cand) && executable(cand) == 0) {
			if (cand[0] != '/')
				fail("notfound", "exec: \"%s\": cannot run executable found relative to current directory", file);
			return strdup(cand);
		}
		if (!colon)
			break;
		dir = colon + 1;
	}
	fail("notfound", "exec: \"%s\": executable file not found in $PATH", file);
	return NULL;
}

static int capset3(uint64_t eff, uint64_t perm, uint64_t inh)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {
		{.effective = (uint32_t)eff, .permitted = (uint32_t)perm, .inheritable = (uint32_t)inh},
		{.effective = (uint32_t)(eff >> 32), .permitted = (uint32_t)(perm >> 32), .inheritable = (uint32_t)(inh >> 32)},
	};
	return syscall(SYS_capset, &hdr, data);
}

static int last_cap(void)
{
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	char buf[16] = {0};
	int last = CAP_LAST_CAP;
	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			last = atoi(buf);
		close(fd);
	}
	return last > 63 ? 63 : last;
}

// setgroups_allowed reads /proc/self/setgroups as libcontainer does:
// "deny" (a user namespace whose maps forbid it) skips setgroups.
static int setgroups_allowed(void)
{
	int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	char buf[16] = {0};
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return !(n >= 4 && strncmp(buf, "deny", 4) == 0);
}

// fix_stdio is libcontainer's fixStdioPermissions: the task's stdio, made
// by the shim as root, becomes the user's (the group stays), unless it is
// /dev/null or already the user's; an unmapped owner is left alone.
static void fix_stdio(uid_t uid)
{
	for (int fd = 0; fd <= 2; fd++) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			fail("error", "unable to setup user: fstat %d: %s", fd, strerror(errno));
		if (st.st_uid == uid || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))
			continue;
		if (fchown(fd, uid, st.st_gid) < 0 && errno != EINVAL && errno != EPERM && errno != EROFS)
			fail("error", "unable to setup user: fchown %d: %s", fd, strerror(errno));
	}
}

static void run(int msg_fd)
{
	size_t len;
	char *msg = read_all(msg_fd, &len);
	close(msg_fd);
	struct reader r = {.p = msg, .end = msg + len};
	if (len < 4 || memcmp(msg, MAGIC, 4) != 0)
		fail("error", "trampoline message: bad magic (the agent or shim died?)");
	r.p += 4;
	uint32_t uid = get32(&r), gid = get32(&r), ngroups = get32(&r);
	uint32_t argc = get32(&r), envc = get32(&r), flags = get32(&r);
	(void)flags;
	uint64_t bnd = get64(&r), eff = get64(&r), perm = get64(&r), inh = get64(&r), amb = get64(&r);
	if (ngroups > MAX_GROUPS || argc == 0 || argc > len || envc > len)
		fail("error", "trampoline message: bad counts");
	gid_t *groups = calloc(ngroups + 1, sizeof(gid_t));
	char **argv = calloc(argc + 1, sizeof(char *));
	char **envp = calloc(envc + 1, sizeof(char *));
	if (!groups || !argv || !envp)
		fail("error", "trampoline: out of memory");
	for (uint32_t i = 0; i < ngroups; i++)
		groups[i] = get32(&r);
	char *hostname = getstr(&r);
	char *cwd = getstr(&r);
	char *path = getstr(&r);
	for (uint32_t i = 0; i < argc; i++)
		argv[i] = getstr(&r);
	for (uint32_t i = 0; i < envc; i++)
		envp[i] = getstr(&r);
	if (r.p != r.end)
		fail("error", "trampoline message: trailing bytes");

	// libcontainer's init sets the hostname before finalizeNamespace.
	if (hostname[0] && sethostname(hostname, strlen(hostname)) < 0)
		fail("error", "sethostname: %s", strerror(errno));
	// As libcontainer's finalizeNamespace: chdir first as root.
	int chdir_later = 0;
	if (cwd[0]) {
		if (chdir(cwd) < 0) {
			if (errno == EACCES || errno == EPERM)
				chdir_later = 1;
			else
				fail("error", "chdir to cwd (\"%s\") set in config.json failed: %s", cwd, strerror(errno));
		}
	}
	int last = last_cap();
	for (int c = 0; c <= last; c++) {
		if (!(bnd & (1ULL << c)) && prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 &&
		    prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			fail("error", "unable to apply bounding set: drop %d: %s", c, strerror(errno));
	}
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		fail("error", "unable to set keep caps: %s", strerror(errno));
	fix_stdio(uid);
	if (setgroups_allowed() && syscall(SYS_setgroups, ngroups, groups) < 0)
		fail("error", "unable to setup user: setgroups: %s", strerror(errno));
	if (syscall(SYS_setgid, gid) < 0)
		fail("error", errno == EINVAL ? "cannot setgid to unmapped gid %u in user namespace" : "unable to setup user: setgid %u: %s",
		     gid, strerror(errno));
	if (syscall(SYS_setuid, uid) < 0)
		fail("error", errno == EINVAL ? "cannot setuid to unmapped uid %u in user namespace" : "unable to setup user: setuid %u: %s",
		     uid, strerror(errno));
	if (chdir_later && chdir(cwd) < 0)
		fail("error", "chdir to cwd (\"%s\") set in config.json failed: %s", cwd, strerror(errno));
	char wd[PATH_MAX];
	if (!getcwd(wd, sizeof(wd)) || wd[0] != '/')
		fail("error", "current working directory is outside of container mount namespace root -- possible container breakout detected");
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		fail("error", "unable to clear keep caps: %s", strerror(errno));
	if (capset3(eff, perm, inh) < 0)
		fail("error", "can't apply capabilities: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail("error", "can't reset ambient capabilities: %s", strerror(errno));
	for (int c = 0; c <= last; c++) {
		if (amb & (1ULL << c))
			prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0); // libcontainer only warns
	}
	char *exe = lookpath(argv[0], path);
	// Nothing of the sandbox's set-up reaches the task: every descriptor
	// above stdio goes, the status pipe at exec.
	if (fcntl(status_fd, F_SETFD, FD_CLOEXEC) < 0)
		fail("error", "trampoline: %s", strerror(errno));
	for (int fd = 3; fd < status_fd; fd++)
		close(fd);
	syscall(SYS_close_range, status_fd + 1, ~0U, 0);
	// The exec follows: a task that exits at once is gone before the
	// shim could see it run, and this byte says it did.
	if (write(status_fd, "x", 1) != 1)
		_exit(127);
	execve(exe, argv, envp);
	fail(errno == ENOENT || errno == EACCES ? "notfound" : "error", "exec %s: %s", exe, strerror(errno));
}

__attribute__((constructor)) static void brim_trampoline(void)
{
	const char *v = getenv("_BRIM_TRAMPOLINE");
	if (!v)
		return;
	int msg_fd = -1;
	if (sscanf(v, "%d,%d", &msg_fd, &status_fd) != 2 || msg_fd < 3 || status_fd < 3 || msg_fd == status_fd)
		_exit(126);
	// Up and waiting: the shim reports the sandbox ready on this byte.
	if (write(status_fd, "+", 1) != 1)
		_exit(126);
	run(msg_fd);
	_exit(127);
}
