package image

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// authFile is a Docker-style auth.json (docker's config.json, podman's
// auth.json): credentials per registry host. Credential helpers
// (credHelpers, credsStore) are not run: the agent runs no programs a
// config file names.
type authFile struct {
	Auths map[string]authEntry `json:"auths"`
}

type authEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// keychain resolves credentials by registry host from one auth file.
type keychain map[string]authn.AuthConfig

// loadAuth reads path; an empty path is anonymous for every registry.
func loadAuth(path string) (keychain, error) {
	if path == "" {
		return keychain{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read auth file: %w", err)
	}
	return parseAuth(path, b)
}

func parseAuth(path string, b []byte) (keychain, error) {
	var f authFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse auth file %s: %w", path, err)
	}
	kc := keychain{}
	for key, e := range f.Auths {
		cfg := authn.AuthConfig{Username: e.Username, Password: e.Password,
			IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("parse auth file %s: %s: auth is not base64: %w", path, key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("parse auth file %s: %s: auth is not user:password", path, key)
			}
			cfg.Username, cfg.Password = user, pass
		}
		kc[authKey(key)] = cfg
	}
	return kc, nil
}

// authKey is an auths key's host in the one spelling: Docker writes
// Docker Hub as https://index.docker.io/v1/.
func authKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	return registryName(key)
}

// Resolve implements authn.Keychain.
func (k keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	cfg, ok := k[registryName(r.RegistryStr())]
	if !ok {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(cfg), nil
}
