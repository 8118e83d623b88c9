package main

import (
	"github.com/spf13/pflag"

	"github.com/brimnode/brim/agent/agentd"
)

// registerImageFlags binds the image store's flags (agentd.ImageConfig)
// to c, with c's values as defaults.
func registerImageFlags(f *pflag.FlagSet, c *agentd.ImageConfig) {
	f.StringVar(&c.AuthFile, "image-auth-file", c.AuthFile, "Docker-style auth.json with registry credentials, read at each pull (docs/images.md)")
	f.StringArrayVar(&c.CAs, "image-registry-ca", c.CAs, "HOST=FILE: a PEM CA trusted for registry HOST besides the system's (repeatable)")
	f.StringArrayVar(&c.Insecure, "image-insecure-registry", c.Insecure, "HOST: speak plain HTTP to this registry; loopback hosts only (repeatable)")
	f.StringArrayVar(&c.Mirrors, "image-mirror", c.Mirrors, "HOST=MIRROR: try MIRROR before registry HOST (repeatable, in order)")
	f.Int64Var(&c.CacheMaxMiB, "image-cache-max", c.CacheMaxMiB, "cap of the image cache in MiB (least recently used images no container uses go first; 0: no cap); taken out of the disk in --resources")
	f.Int64Var(&c.UpperLimitMiB, "image-upper-limit", c.UpperLimitMiB, "MiB a read-write image root may write when its container asks no disk (0: no limit)")
	f.DurationVar(&c.PullTimeout, "image-pull-timeout", c.PullTimeout, "bound of one image pull, by brim image pull or a launch (positive)")
	f.DurationVar(&c.GCInterval, "image-gc-interval", c.GCInterval, "how often the image cache is garbage-collected besides after each pull (positive)")
	f.DurationVar(&c.DiskInterval, "image-disk-interval", c.DiskInterval, "how often read-write image roots are measured against their disk limit where the file system has no project quotas (positive)")
}
