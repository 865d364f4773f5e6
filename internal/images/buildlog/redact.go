package buildlog

import (
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every secret found in a log line.
const Redacted = "[REDACTED]"

// minExactSecret is the shortest exact secret value worth replacing:
// shorter values would blank ordinary words of the log.
const minExactSecret = 6

var (
	// envSecret matches NAME=value and NAME: value where the name says it
	// holds a secret (PASSWORD, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, …).
	envSecret = regexp.MustCompile(`(?i)\b([A-Z0-9_.-]*(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIALS?|AUTH)[A-Z0-9_.-]*)(["']?\s*[:=]\s*["']?)([^\s"']+)`)
	// authHeader matches an HTTP authorization value.
	authHeader = regexp.MustCompile(`(?i)\b(Bearer|Basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}`)
	authScheme = regexp.MustCompile(`(?i)^(Bearer|Basic|token)$`)
	// urlCredentials matches the userinfo of a URL.
	urlCredentials = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@:]*(?::[^/\s@]*)?@`)
	// tokenShapes are credentials recognisable on their own.
	tokenShapes = regexp.MustCompile(strings.Join([]string{
		`\bgh[pousr]_[A-Za-z0-9]{20,}`,                                 // GitHub tokens
		`\bgithub_pat_[A-Za-z0-9_]{20,}`,                               // GitHub fine-grained tokens
		`\bglpat-[A-Za-z0-9_-]{20,}`,                                   // GitLab tokens
		`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,                                // AWS access key ids
		`\bxox[abprs]-[A-Za-z0-9-]{10,}`,                               // Slack tokens
		`\bsk-[A-Za-z0-9_-]{20,}`,                                      // OpenAI-style keys
		`\bnpm_[A-Za-z0-9]{36}\b`,                                      // npm tokens
		`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, // JWTs
		`-----BEGIN [A-Z ]*PRIVATE KEY-----`,                           // PEM private keys
	}, "|"))
)

// Redactor removes secrets from log lines. The zero value redacts the
// pattern-shaped secrets only.
type Redactor struct {
	exact    []string
	replacer *strings.Replacer
}

// NewRedactor returns a redactor that also replaces each of the exact
// secret values (values shorter than 6 bytes, or holding a newline, are
// ignored).
func NewRedactor(secrets ...string) *Redactor {
	var exact []string
	for _, s := range secrets {
		if len(s) >= minExactSecret && !strings.ContainsAny(s, "\r\n") {
			exact = append(exact, s)
		}
	}
	// Longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(exact, func(a, b string) int { return len(b) - len(a) })
	exact = slices.Compact(exact)
	r := &Redactor{exact: exact}
	if len(exact) > 0 {
		pairs := make([]string, 0, 2*len(exact))
		for _, s := range exact {
			pairs = append(pairs, s, Redacted)
		}
		r.replacer = strings.NewReplacer(pairs...)
	}
	return r
}

// Redact returns line with every recognised secret replaced by Redacted.
// Cheap substring checks guard each pattern, so that ordinary output costs
// a few scans of the line.
func (r *Redactor) Redact(line string) string {
	if r != nil && r.replacer != nil {
		line = r.replacer.Replace(line)
	}
	if strings.Contains(line, "@") && strings.Contains(line, "://") {
		line = urlCredentials.ReplaceAllString(line, "${1}"+Redacted+"@")
	}
	lower := strings.ToLower(line)
	if containsAny(lower, "bearer", "basic", "token") {
		line = authHeader.ReplaceAllString(line, "${1}${2}"+Redacted)
	}
	if strings.ContainsAny(line, "=:") && containsAny(lower, envSecretWords...) {
		line = envSecret.ReplaceAllStringFunc(line, func(m string) string {
			sub := envSecret.FindStringSubmatch(m)
			if sub[3] == Redacted || authScheme.MatchString(sub[3]) {
				return m
			}
			return sub[1] + sub[2] + Redacted
		})
	}
	if containsAny(line, tokenPrefixes...) {
		line = tokenShapes.ReplaceAllString(line, Redacted)
	}
	return line
}

// envSecretWords and tokenPrefixes are the literal parts of envSecret
// (lower case) and tokenShapes.
var (
	envSecretWords = []string{"passw", "passphrase", "secret", "token", "key", "credential", "auth"}
	tokenPrefixes  = []string{"gh", "github_pat_", "glpat-", "AKIA", "ASIA", "xox", "sk-", "npm_", "eyJ", "PRIVATE KEY"}
)

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// secretNamePattern says which environment variable names hold secrets.
var secretNamePattern = regexp.MustCompile(`(?i)(api[_-]?key|authorization|bearer|client[_-]?secret|password|secret|token)`)

// EnvSecrets returns the values of the variables in environ ("NAME=value")
// whose names say they hold a secret and whose values are at least 8 bytes.
func EnvSecrets(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && len(value) >= 8 && secretNamePattern.MatchString(name) {
			out = append(out, value)
		}
	}
	return out
}
