package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/messages"
)

func TestStartPacketServicesAreValidatedBeforeTheyBecomeTheTaskEnvironment(t *testing.T) {
	good := messages.ServiceEndpoint{Type: "postgres", Host: "postgres", Port: 5432, User: "forge", Database: "forge",
		PasswordFile: "/run/forge-secrets/postgres-password"}
	assert.NoError(t, validateServices([]messages.ServiceEndpoint{good}))
	for name, mutate := range map[string]func(*messages.ServiceEndpoint){
		"unknown type":           func(e *messages.ServiceEndpoint) { e.Type = "mysql" },
		"host not the alias":     func(e *messages.ServiceEndpoint) { e.Host = "10.0.0.1" },
		"port out of range":      func(e *messages.ServiceEndpoint) { e.Port = 70000 },
		"user with a newline":    func(e *messages.ServiceEndpoint) { e.User = "forge\nPATH=/tmp" },
		"database with equals":   func(e *messages.ServiceEndpoint) { e.Database = "a=b" },
		"password file outside":  func(e *messages.ServiceEndpoint) { e.PasswordFile = "/etc/shadow" },
		"password file climbing": func(e *messages.ServiceEndpoint) { e.PasswordFile = "/run/forge-secrets/../../etc/shadow" },
	} {
		t.Run(name, func(t *testing.T) {
			e := good
			mutate(&e)
			assert.Error(t, validateServices([]messages.ServiceEndpoint{e}))
		})
	}
	assert.Error(t, validateServices([]messages.ServiceEndpoint{good, good}), "a service listed twice")
}
