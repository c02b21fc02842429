# syntax=docker/dockerfile:1
# The function's runtime image: a static binary on distroless, nonroot,
# listening on 9443.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY fn/ fn/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /function ./fn

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /function /function
EXPOSE 9443
USER 65532:65532
ENTRYPOINT ["/function"]
