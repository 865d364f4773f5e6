package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/forgedev/forged/internal/daemon/config"
	"github.com/forgedev/forged/internal/kit/termsafe"
)

// configEnv names the configuration file when --config is not given.
const configEnv = config.EnvPrefix + "CONFIG"

// Command annotations for the configuration layer.
const (
	// annotationOwnConfig marks a command that applies the configuration
	// itself (config print).
	annotationOwnConfig = "forged/own-config"
)

// notSettings are flags that are never configuration: help, version, the
// file's own path, and output formats.
func notSettings(flag string) bool {
	switch flag {
	case "help", "version", "config", "json":
		return true
	}
	return false
}

// configLayer applies the file and the environment to the flags of the
// command being run. known lists every key of every command, so one file
// serves them all: a command applies the keys it has and ignores the rest,
// while a key no command has is refused.
type configLayer struct {
	root      *cobra.Command
	path      string
	lookupEnv func(string) (string, bool)
}

// known reports whether key is a setting of some command.
func (c *configLayer) known(key string) bool {
	found := false
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			found = found || (!notSettings(f.Name) && config.Key(f.Name) == key)
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.root)
	return found
}

// filePath is the configuration file's path: --config, else
// $FORGED_CONFIG, else none ("").
func (c *configLayer) filePath() string {
	if c.path != "" {
		return c.path
	}
	path, _ := c.lookupEnv(configEnv)
	return path
}

// file loads the configuration file, if one is named.
func (c *configLayer) file() (*config.File, error) {
	path := c.filePath()
	if path == "" {
		return nil, nil
	}
	return config.LoadFile(path, c.known)
}

// apply layers the environment and the file under cmd's command line.
func (c *configLayer) apply(cmd *cobra.Command) ([]config.Setting, error) {
	file, err := c.file()
	if err != nil {
		return nil, err
	}
	return config.Apply(cmd.Flags(), config.Options{File: file, LookupEnv: c.lookupEnv, Skip: notSettings})
}

// describeEnv appends each setting's environment variable to its flag's
// help.
func (c *configLayer) describeEnv(cmd *cobra.Command) {
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if !notSettings(f.Name) && !strings.Contains(f.Usage, config.EnvPrefix) {
			f.Usage += " (env " + config.EnvName(f.Name) + ")"
		}
	})
	for _, sub := range cmd.Commands() {
		c.describeEnv(sub)
	}
}

// preRun is the root's PersistentPreRunE.
func (c *configLayer) preRun(cmd *cobra.Command, _ []string) error {
	if cmd.Annotations[annotationOwnConfig] != "" {
		return nil
	}
	_, err := c.apply(cmd)
	return err
}

func configCommand(layer *configLayer) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show forged's configuration"}
	var asJSON bool
	print := &cobra.Command{
		Use:   "print [daemon flags]",
		Short: "Print the daemon's effective configuration and where each value comes from (flag, env, file, default)",
		Long: "Print every daemon setting: its file key, flag, environment variable, effective value and source.\n" +
			"Precedence: flags, then FORGED_* environment variables, then the file (--config or $FORGED_CONFIG).\n" +
			"It accepts the daemon's flags, so that a command line can be checked before it is used.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationOwnConfig: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := layer.apply(cmd)
			if err != nil {
				return err
			}
			return printSettings(cmd.OutOrStdout(), layer.filePath(), settings, asJSON)
		},
	}
	// The daemon's own flags, so that every one of them is shown.
	daemon := daemonCommand()
	print.Flags().AddFlagSet(daemon.Flags())
	print.Flags().BoolVar(&asJSON, "json", false, "print the settings as JSON")
	cmd.AddCommand(print)
	return cmd
}

func printSettings(w io.Writer, file string, settings []config.Setting, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"file": file, "settings": settings})
	}
	if file != "" {
		fmt.Fprintf(w, "# file %s\n", termsafe.String(file))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tFLAG\tENV")
	for _, s := range settings {
		value := s.Value
		if s.Values != nil {
			value = strings.Join(s.Values, ",")
		}
		if value == "" {
			value = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t--%s\t%s\n", s.Key, termsafe.String(value), s.Source, s.Flag, s.Env)
	}
	return tw.Flush()
}
