# usersserver: the example users service, which calls the math service,
# as a static binary in an empty image (no shell, no libc), run as a
# non-root user. Build it from the repository's root
# (docs/kubernetes.md):
#
#	docker build -f deploy/images/usersserver.Dockerfile -t usersserver .
#
# BUILDER=prebuilt takes the binary, built outside with the same command
# (GOOS=linux), from bin/usersserver of the context, and the CA bundle from
# bin/ca-certificates.crt: for a machine that cannot pull the Go image
# (deploy/images_test.go builds it so with buildah).
ARG BUILDER=source

FROM golang:1.26 AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/usersserver ./examples/services/usersserver
RUN cp /etc/ssl/certs/ca-certificates.crt /out/

FROM scratch AS prebuilt
COPY bin/usersserver bin/ca-certificates.crt /out/

FROM ${BUILDER} AS build

FROM scratch
COPY --from=build /out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/usersserver /usersserver
USER 65532:65532
EXPOSE 7071/tcp 7946/tcp 7946/udp 8081/tcp
ENTRYPOINT ["/usersserver"]
