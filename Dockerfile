# The wtrace image: one static binary on an empty base, run as a non-root
# user. Build it with a container engine:
#
#   docker build -t wtrace:dev .
#   docker run --rm -v "$PWD:/data" wtrace:dev replay /data/session.wt --listen 0.0.0.0:8080
#
# or without one, as CI does (the same binary and configuration, from this
# file): go run ./tools/mkimage -o wtrace-image.tar && docker load < wtrace-image.tar
#
# The session is mounted (a ConfigMap, a volume) or fetched by an init
# container into /data, the working directory; see deploy/.

# The Go version must be the repository's (go.mod's, and the CI machine's):
# tools/mkimage's test checks it, so that both builds make the same binary.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN WTRACE_VERSION="$VERSION" sh tools/build-static.sh /out

FROM scratch
COPY --from=build /out/wtrace /usr/local/bin/wtrace
COPY --from=build --chown=65532:65532 /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV TMPDIR=/tmp
EXPOSE 8080
LABEL org.opencontainers.image.title="wtrace" \
      org.opencontainers.image.description="Record and replay Kubernetes API watch traffic" \
      org.opencontainers.image.source="https://github.com/wtrace/wtrace"
ENTRYPOINT ["/usr/local/bin/wtrace"]
CMD ["--help"]
