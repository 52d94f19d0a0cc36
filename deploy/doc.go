// Package deploy holds wizard's container images (images/) and Kubernetes
// manifests (kubernetes/), and the tests that keep them honest: the
// images' binaries build static with the flags the Dockerfiles give (and
// the images build with buildah where it runs), and every manifest
// decodes strictly into its Kubernetes type and agrees with the others
// (ports, selectors, Secrets, the shutdown's timing). It is a module of
// its own so that the Kubernetes API types stay out of wizard's.
package deploy
