# Threadcast image: the static binaries on an empty base (FROM scratch), run
# as the non-root user 65532 with the CA certificates for TLS to NATS. The
# entrypoint is `threadcast` (no arguments: `threadcast serve`, the embedded
# NATS server keeping its data and the generated signing key in the volume
# /data); the Helm chart (deploy/helm/threadcast) runs /ingest and /fanout
# from the same image.
#
# The build context is not the repository: scripts/image.sh builds the
# binaries on the host (CGO_ENABLED=0) and stages them with this file, the
# host's CA bundle and the passwd/group entries, so that the build needs no
# base image from a registry:
#
#   scripts/image.sh build            # podman (or IMAGE_TOOL=docker)
#
# Context layout: threadcast, ingest, fanout, ca-certificates.crt, passwd,
# group, data/ (empty: the volume's mount point, owned by 65532).
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd group /etc/
COPY --chown=65532:65532 data /data
COPY --chown=65532:65532 data /tmp
COPY threadcast ingest fanout /
# The environment is every binary's (flags are THREADCAST_<FLAG>): the
# chart sets THREADCAST_HTTP for ingest (:8081) and fanout; run /ingest
# from the image otherwise with --http.
ENV PATH=/ \
    HOME=/data \
    THREADCAST_DATA=/data \
    THREADCAST_HTTP=:8080
USER 65532:65532
VOLUME /data
# threadcast serve and fanout: the public HTTP; ingest: health, metrics and
# the bridge.
EXPOSE 8080 8081
STOPSIGNAL SIGTERM
ENTRYPOINT ["threadcast"]
