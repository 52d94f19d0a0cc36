# mathserver: the example math service, as a static binary in an empty
# image (no shell, no libc), run as a non-root user. Build it from the
# repository's root (docs/kubernetes.md):
#
#	docker build -f deploy/images/mathserver.Dockerfile -t mathserver .
#
# BUILDER=prebuilt takes the binary, built outside with the same command
# (GOOS=linux), from bin/mathserver of the context, and the CA bundle from
# bin/ca-certificates.crt: for a machine that cannot pull the Go image
# (deploy/images_test.go builds it so with buildah).
ARG BUILDER=source

FROM golang:1.26 AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/mathserver ./examples/services/mathserver
RUN cp /etc/ssl/certs/ca-certificates.crt /out/

FROM scratch AS prebuilt
COPY bin/mathserver bin/ca-certificates.crt /out/

FROM ${BUILDER} AS build

FROM scratch
COPY --from=build /out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/mathserver /mathserver
USER 65532:65532
EXPOSE 7070/tcp 7946/tcp 7946/udp 8081/tcp
ENTRYPOINT ["/mathserver"]
