package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
)

func exampleCommand() *cobra.Command {
	var dir, busybox, stateRoot, project string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "example",
		Short: "Create a sample repository, its busybox base image and a dispatch (nothing from the internet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			repo := filepath.Join(abs, "repo")
			if _, err := os.Stat(repo); err == nil {
				return fmt.Errorf("%s already exists; choose another --dir", repo)
			}
			docker, err := dockerops.Connect(ctx, dockerops.Options{})
			if err != nil {
				return err
			}
			defer docker.Close()
			id, err := example.BuildBaseImage(ctx, docker, busybox)
			if err != nil {
				return fmt.Errorf("base image: %w", err)
			}
			if err := example.CreateRepo(ctx, repo, example.RepoOptions{}); err != nil {
				return fmt.Errorf("sample repository: %w", err)
			}
			runnerID, err := runner.LoadRunnerID(stateRoot)
			if err != nil {
				return err
			}
			d, err := example.NewDispatch(example.DispatchOptions{RepoPath: repo, RunnerID: runnerID, Project: project})
			if err != nil {
				return err
			}
			path := filepath.Join(abs, "dispatch.json")
			if err := example.WriteDispatch(path, d); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{
					"baseImage": example.BaseImage, "imageId": id, "repository": repo, "dispatch": path, "branch": example.Branch})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "base image:  %s (%s)\nrepository:  %s\ndispatch:    %s\nbranch:      %s\n", example.BaseImage, id, repo, path, example.Branch)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "forged-example", "directory to create the example in")
	cmd.Flags().StringVar(&stateRoot, "state-root", defaultStateRoot(), "state root of the forged that will run the dispatch (its runner id goes into the dispatch)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was created as JSON: {baseImage, imageId, repository, dispatch, branch}")
	cmd.Flags().StringVar(&project, "project", "sample", "the repository name in the dispatch, which labels the images built for it")
	cmd.Flags().StringVar(&busybox, "busybox", "/bin/busybox", "static busybox binary (Debian package busybox-static)")
	return cmd
}
