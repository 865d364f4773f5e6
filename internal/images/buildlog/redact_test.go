package buildlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedact(t *testing.T) {
	r := NewRedactor("fencing-token-value-42", "short", "")
	cases := []struct{ in, want string }{
		{"plain build output", "plain build output"},
		{"GITHUB_TOKEN=abc123def456", "GITHUB_TOKEN=[REDACTED]"},
		{`export DB_PASSWORD="hunter22"`, `export DB_PASSWORD="[REDACTED]"`},
		{"aws_secret_access_key: wJalrXUtnFEMI", "aws_secret_access_key: [REDACTED]"},
		{"Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer [REDACTED]"},
		{"clone https://user:pa55w0rd@git.example/x.git", "clone https://[REDACTED]@git.example/x.git"},
		{"fetch https://ghp_0123456789abcdef0123456789@github.com/", "fetch https://[REDACTED]@github.com/"},
		{"key ghp_0123456789abcdefghij0123456789ABCDEF", "key [REDACTED]"},
		{"id AKIAIOSFODNN7EXAMPLE ok", "id [REDACTED] ok"},
		{"echo fencing-token-value-42!", "echo [REDACTED]!"},
		{"the short word stays", "the short word stays"},
		{"jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.sig_x", "jwt [REDACTED]"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, r.Redact(c.in), c.in)
	}
	var zero *Redactor
	assert.Equal(t, "TOKEN=[REDACTED]", zero.Redact("TOKEN=abcdefgh"))
}

func TestEnvSecrets(t *testing.T) {
	got := EnvSecrets([]string{"HOME=/root", "GITHUB_TOKEN=0123456789", "API_KEY=short", "MY_PASSWORD=longenough", "broken"})
	assert.Equal(t, []string{"0123456789", "longenough"}, got)
}

// FuzzRedact checks that an exact secret never survives redaction, wherever
// it sits in a line.
func FuzzRedact(f *testing.F) {
	f.Add("prefix ", "s3cr3t-value", " suffix")
	f.Add("TOKEN=", "abcdefgh", "")
	f.Add("https://", "user:pw", "@host")
	f.Fuzz(func(t *testing.T, before, secret, after string) {
		if len(secret) < minExactSecret || strings.ContainsAny(secret, "\r\n") || strings.Contains(Redacted, secret) {
			t.Skip()
		}
		out := NewRedactor(secret).Redact(before + secret + after)
		// The secret's own occurrence is gone: the output holds at most as
		// many copies as the redacted surroundings could form by chance.
		if strings.Count(out, secret) > strings.Count(before+after, secret) {
			t.Fatalf("secret survived: %q -> %q", before+secret+after, out)
		}
	})
}

// BenchmarkRedactPlainLine measures the cost of redacting a 1 KiB line of
// ordinary build output (no secret shapes: the common case). Method:
// go test -run xxx -bench RedactPlainLine ./buildlog; a 4 MiB log is about
// 4,100 such lines.
func BenchmarkRedactPlainLine(b *testing.B) {
	r := NewRedactor("attempt-secret-value")
	line := strings.Repeat("Step 3/9 : RUN make all -j2 >> build output ", 23)
	b.SetBytes(int64(len(line)))
	for range b.N {
		r.Redact(line)
	}
}
