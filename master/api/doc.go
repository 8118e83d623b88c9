// Package api holds the JSON wire types of the master's operator HTTP
// API: the body of GET /state (State and its parts) and the request
// bodies of POST /reserve, /unreserve, /quota and /weights. The master
// (package master, which re-exports them under the same names) encodes
// them; the operator client (package client) decodes them, without
// importing the master.
//
// It owns no behaviour: plain structs with their JSON tags, importing the
// standard library only. Changing a field or a tag changes the wire.
package api
