# settee in an image FROM scratch: no base image can be pulled where it is
# built, so `make docker` builds the static binary first and puts it, CA
# certificates and a passwd entry for the non-root user in docker/ctx.
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY --chown=65532:65532 data/ /data/
COPY settee /settee
USER 65532:65532
VOLUME /data
ENV SETTEE_DATA_DIR=/data SETTEE_HTTP=0.0.0.0:5984 SETTEE_REQUIRE_ADMIN=1
EXPOSE 5984 9100
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/settee", "admin", "--url", "http://127.0.0.1:5984", "ping"]
ENTRYPOINT ["/settee", "serve"]
