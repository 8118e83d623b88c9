package pluginpb

import "github.com/hashicorp/go-plugin"

// Handshake is the go-plugin handshake every brim plugin must answer: the
// agent sets BRIM_PLUGIN_MAGIC_COOKIE=brim-oversubscription in the
// plugin's environment and expects protocol version 1 over gRPC.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "BRIM_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "brim-oversubscription",
}

// Plugin names in the go-plugin plugin set.
const (
	EstimatorPlugin = "estimator"
	QoSPlugin       = "qos"
)
