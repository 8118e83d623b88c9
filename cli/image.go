package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/cliout"
)

func newImageCommand() *cobra.Command {
	var socket string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Pull, list and remove the local agent's cached images (docs/images.md)",
		Args:  UsageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultSocket, "the agent's local API socket")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", DefaultAgentTimeout, "how long one call to the agent may take (pull: the whole pull; 0: no bound) before the command fails")
	cl := &agentClient{socket: &socket, timeout: &timeout}
	cmd.AddCommand(newImagePull(cl, &timeout), newImageLs(cl), newImageRm(cl), newImagePrune(cl))
	MarkUsageErrors(cmd)
	return cmd
}

func newImagePull(cl *agentClient, timeout *time.Duration) *cobra.Command {
	var name string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "pull [--name REF] SOURCE",
		Short: "Pull an image into the agent's cache: a reference, or oci:DIR, oci-archive:FILE, docker-archive:FILE on the agent's host",
		Long: `Pull an image into the agent's cache and print its ID. SOURCE is a registry
reference (registry.example.com/app:1, busybox, app@sha256:…), or, to load
an image without a registry (air-gapped hosts), a path on the agent's host:
oci:DIR[:NAME] (an OCI image layout), oci-archive:FILE[:NAME] (its tar),
docker-archive:FILE (a docker save tar). --name names a loaded image.
Every blob is verified by digest; progress goes to stderr, a line per layer.`,
		Args: UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if *timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, *timeout)
				defer cancel()
			}
			stream, err := api.PullImage(ctx, &agentpb.PullImageRequest{Source: args[0], Name: name})
			if err != nil {
				return cl.rpcError(err)
			}
			for {
				p, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return ExitError{Code: 1, Msg: "pull " + args[0] + ": the agent ended the pull without an image"}
				}
				if err != nil {
					if ctx.Err() != nil && cmd.Context().Err() == nil {
						return ExitError{Code: 1, Msg: fmt.Sprintf("pull %s: not done within --timeout %v", args[0], *timeout)}
					}
					return cl.rpcError(err)
				}
				if p.Image != nil {
					fmt.Fprintln(cmd.OutOrStdout(), p.Image.Id)
					return nil
				}
				if !quiet {
					cliout.PullProgress(cmd.ErrOrStderr(), p)
				}
			}
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name (a reference) for an image loaded from a layout or archive")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the image ID")
	return cmd
}

func newImageLs(cl *agentClient) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the agent's cached images, most recently used first",
		Args:    UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			r, err := api.ListImages(cmd.Context(), &agentpb.ListImagesRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), agentclient.ImageViews(r))
			}
			return cliout.Images(cmd.OutOrStdout(), r, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newImageRm(cl *agentClient) *cobra.Command {
	return &cobra.Command{
		Use:     "rm REF|ID…",
		Aliases: []string{"remove"},
		Short:   "Take a name off its image; the image goes with its last name (or at once, given by ID or digest), unless a container uses it",
		Args:    UsageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			var msgs []string
			for _, ref := range args {
				r, err := api.RemoveImage(cmd.Context(), &agentpb.RemoveImageRequest{Ref: ref})
				if err != nil {
					var ee ExitError
					if errors.As(cl.rpcError(err), &ee) {
						msgs = append(msgs, ee.Msg)
					}
					continue
				}
				cliout.Pruned(cmd.OutOrStdout(), ref, r)
			}
			return joinedExit(msgs)
		},
	}
}

func newImagePrune(cl *agentClient) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove every cached image no container uses",
		Args:  UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			r, err := api.PruneImages(cmd.Context(), &agentpb.PruneImagesRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			cliout.Pruned(cmd.OutOrStdout(), "", r)
			return nil
		},
	}
}

// joinedExit is exit 1 with every message, one a line; nil for none.
func joinedExit(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	msg := msgs[0]
	for _, m := range msgs[1:] {
		msg += "\nbrim: " + m
	}
	return ExitError{Code: 1, Msg: msg}
}
