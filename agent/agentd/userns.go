package agentd

import (
	"github.com/brimnode/brim/internal/subid"
)

// usernsRange is the parsed --userns-range (nil when empty), read in
// --subuid-file and --subgid-file when it is a NAME.
func (s SecurityConfig) usernsRange() (*subid.Range, error) {
	if s.UserNSRange == "" {
		if s.UserNS {
			return nil, bad("--userns", "needs --userns-range (START:COUNT, or a NAME in %s and %s)", s.subUIDFile(), s.subGIDFile())
		}
		return nil, nil
	}
	r, err := subid.Parse(s.UserNSRange, s.subUIDFile(), s.subGIDFile())
	if err != nil {
		return nil, bad("--userns-range", "%w", err)
	}
	return &r, nil
}

func (s SecurityConfig) subUIDFile() string {
	if s.SubUIDFile == "" {
		return subid.DefaultSubUIDFile
	}
	return s.SubUIDFile
}

func (s SecurityConfig) subGIDFile() string {
	if s.SubGIDFile == "" {
		return subid.DefaultSubGIDFile
	}
	return s.SubGIDFile
}
