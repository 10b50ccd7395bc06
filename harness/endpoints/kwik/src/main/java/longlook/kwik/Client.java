package longlook.kwik;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import tech.kwik.core.QuicClientConnection;
import tech.kwik.core.QuicStream;
import tech.kwik.core.log.NullLogger;
import tech.kwik.core.log.QLog;

/**
 * The client: one connection to the server of REQUESTS, requests in turn (transfer), all
 * at once (multiplexing) or in turn with LL_THINK_MS pauses (appidle).
 */
final class Client {
    private static final int CHUNK = 256 * 1024;

    private Client() {
    }

    /** kwik's client asks its Logger for the qlog (the server loads tech.kwik.qlog.QLogFrontEnd instead). */
    private static final class QlogLogger extends NullLogger {
        private final QLog qlog;

        QlogLogger(QLog qlog) {
            this.qlog = qlog;
        }

        @Override
        public QLog getQLog() {
            return qlog;
        }
    }

    static int fetchAll(Endpoint.Opts o, Endpoint.AppLog applog) throws Exception {
        if (o.requests().isEmpty()) {
            throw new IllegalArgumentException("REQUESTS is empty");
        }
        URI first = URI.create(o.requests().get(0));
        byte[] id = new byte[8];
        new SecureRandom().nextBytes(id);
        QuicClientConnection.Builder b = QuicClientConnection.newBuilder()
                .uri(new URI("https", null, first.getHost(), first.getPort() == -1 ? 443 : first.getPort(), null, null, null))
                .applicationProtocol(Endpoint.ALPN)
                .noServerCertificateCheck()
                .connectTimeout(Duration.ofSeconds(30))
                .maxIdleTimeout(Duration.ofSeconds(30))
                .defaultStreamReceiveBufferSize(o.flowWindow())
                .maxOpenPeerInitiatedBidirectionalStreams(100)
                .logger(new QlogLogger(Qlog.open("client", id)));
        if (o.keylog() != null) {
            b.secrets(Path.of(o.keylog()));
        }
        QuicClientConnection conn = b.build();
        long began = System.nanoTime();
        conn.connect();
        // The handshake's duration stands in for the RTT (kwik does not expose its
        // estimate): it only sizes the linger below.
        long rttMs = (System.nanoTime() - began) / 1_000_000;
        if (!o.upload()) {
            Files.createDirectories(o.downloads());
        }
        List<String> names = new ArrayList<>();
        for (String r : o.requests()) {
            names.add(URI.create(r).getPath().replaceFirst("^/", ""));
        }
        switch (o.testcase()) {
            case "multiplexing" -> {
                ExecutorService pool = Executors.newFixedThreadPool(Math.min(names.size(), 64));
                List<Future<Long>> all = new ArrayList<>();
                for (String n : names) {
                    all.add(pool.submit(() -> one(o, applog, conn, n)));
                }
                for (Future<Long> f : all) {
                    f.get();
                }
                pool.shutdown();
            }
            case "appidle" -> {
                long last = 0;
                for (int i = 0; i < names.size(); i++) {
                    if (i > 0) {
                        applog.event("idle_start", last, 0);
                        Thread.sleep(o.think().toMillis());
                        applog.event("idle_end", last, 0);
                    }
                    last = one(o, applog, conn, names.get(i));
                }
            }
            default -> {
                for (String n : names) {
                    one(o, applog, conn, n);
                }
            }
        }
        // Our ACK of the last bytes must reach the server before the close.
        Thread.sleep(Math.min(25 + 2 * rttMs, 2000));
        conn.closeAndWait(Duration.ofSeconds(2));
        return 0;
    }

    /** One request on a new stream; returns the stream's ID. */
    private static long one(Endpoint.Opts o, Endpoint.AppLog applog, QuicClientConnection conn, String name) throws Exception {
        QuicStream stream = conn.createStream(true);
        long id = stream.getStreamId();
        if (o.upload()) {
            byte[] body = Files.readAllBytes(o.www().resolve(name));
            applog.event("request_start", id, body.length);
            try (OutputStream out = stream.getOutputStream()) {
                out.write(("PUT /" + name + "\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(body);
            }
            InputStream in = stream.getInputStream();
            while (in.read() != -1) {
                // the server answers with FIN alone, once it has every byte
            }
            applog.event("request_done", id, body.length);
            return id;
        }
        applog.event("request_start", id, 0);
        try (OutputStream out = stream.getOutputStream()) {
            out.write(("GET /" + name + "\r\n").getBytes(StandardCharsets.US_ASCII));
        }
        long received = 0;
        try (InputStream in = stream.getInputStream(); OutputStream file = Files.newOutputStream(o.downloads().resolve(name))) {
            byte[] buf = new byte[CHUNK];
            int got;
            while ((got = in.read(buf)) > 0) {
                file.write(buf, 0, got);
                received += got;
            }
        }
        applog.event("request_done", id, received);
        return id;
    }
}
