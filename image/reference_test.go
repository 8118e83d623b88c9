package image

import (
	"errors"
	"testing"
)

func TestParseSource(t *testing.T) {
	d := "sha256:" + "ab12" + "0000000000000000000000000000000000000000000000000000000000ab"
	cases := []struct {
		in   string
		want Source
	}{
		{"busybox", Source{Transport: Registry, Ref: "docker.io/library/busybox:latest"}},
		{"busybox:1.36", Source{Transport: Registry, Ref: "docker.io/library/busybox:1.36"}},
		{"docker.io/busybox", Source{Transport: Registry, Ref: "docker.io/library/busybox:latest"}},
		{"index.docker.io/library/busybox:1", Source{Transport: Registry, Ref: "docker.io/library/busybox:1"}},
		{"team/app:2", Source{Transport: Registry, Ref: "docker.io/team/app:2"}},
		{"Registry.Example.com:5000/team/app", Source{Transport: Registry, Ref: "registry.example.com:5000/team/app:latest"}},
		{"localhost:5000/app@" + d, Source{Transport: Registry, Ref: "localhost:5000/app@" + d}},
		{"busybox:1.36@" + d, Source{Transport: Registry, Ref: "docker.io/library/busybox@" + d}},
		{"oci:/srv/layout", Source{Transport: OCILayout, Path: "/srv/layout"}},
		{"oci:/srv/layout:v1", Source{Transport: OCILayout, Path: "/srv/layout", Name: "v1"}},
		{"oci-archive:img.tar", Source{Transport: OCIArchive, Path: "img.tar"}},
		{"docker-archive:/a/b.tar:example.com/app:1", Source{Transport: DockerArchive, Path: "/a/b.tar", Name: "example.com/app:1"}},
		{"docker-archive:/a/b.tar:app", Source{Transport: DockerArchive, Path: "/a/b.tar", Name: "app"}},
	}
	for _, c := range cases {
		got, err := ParseSource(c.in)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", c.in, err)
			continue
		}
		got.ref = nil
		if got != c.want {
			t.Errorf("ParseSource(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if again, err := ParseSource(got.String()); err != nil || again.String() != got.String() {
			t.Errorf("ParseSource(%q) does not round-trip: %v, %v", got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "UPPER", "a b", "oci:", "oci:dir:", "app@sha256:short", "docker-archive:"} {
		if _, err := ParseSource(bad); !errors.Is(err, ErrInvalidReference) {
			t.Errorf("ParseSource(%q) = %v, want ErrInvalidReference", bad, err)
		}
	}
}

func TestParseAuth(t *testing.T) {
	kc, err := parseAuth("auth.json", []byte(`{"auths": {
		"https://index.docker.io/v1/": {"auth": "dXNlcjpwYTpzcw=="},
		"registry.example.com:5000": {"username": "u2", "password": "p2"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := kc["docker.io"]; c.Username != "user" || c.Password != "pa:ss" {
		t.Errorf("docker.io = %+v, want user / pa:ss", c)
	}
	if c := kc["registry.example.com:5000"]; c.Username != "u2" || c.Password != "p2" {
		t.Errorf("registry.example.com:5000 = %+v", c)
	}
	for _, bad := range []string{`{"auths": {"h": {"auth": "!!"}}}`, `{"auths": {"h": {"auth": "bm9jb2xvbg=="}}}`, `[`} {
		if _, err := parseAuth("auth.json", []byte(bad)); err == nil {
			t.Errorf("parseAuth(%s) accepted", bad)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := []Options{
		{Root: "/r"},
		{Root: "/r", Registries: map[string]RegistryConfig{"127.0.0.1:5000": {Insecure: true}, "localhost": {Insecure: true}, "[::1]:80": {Insecure: true}}},
		{Root: "/r", Platform: "linux/arm64/v8"},
	}
	for _, o := range ok {
		if err := o.validate(); err != nil {
			t.Errorf("validate(%+v): %v", o, err)
		}
	}
	bad := []Options{
		{},
		{Root: "/r", Registries: map[string]RegistryConfig{"10.0.0.1:5000": {Insecure: true}}},
		{Root: "/r", Registries: map[string]RegistryConfig{"localhost.example.com": {Insecure: true}}},
		{Root: "/r", Registries: map[string]RegistryConfig{"docker.io": {Mirrors: []string{"https://m/x"}}}},
		{Root: "/r", Platform: "arm64"},
		{Root: "/r", MaxBytes: -1},
	}
	for _, o := range bad {
		if err := o.validate(); err == nil {
			t.Errorf("validate(%+v) accepted", o)
		}
	}
}
