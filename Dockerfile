# syntax=docker/dockerfile:1
# The function's runtime image: a static binary on distroless, nonroot,
# listening on 9443. `make package` builds the same image without Docker
# (tools/xpkg/cmd/runtime-image: the binary alone on an empty base, same user,
# port and entrypoint; test/package checks they agree). Multi-platform:
#   docker buildx build --platform linux/amd64,linux/arm64 .
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY fn/ fn/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags '-s -w' -o /function ./fn

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /function /function
EXPOSE 9443
USER 65532:65532
ENTRYPOINT ["/function"]
