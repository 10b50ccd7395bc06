package longlook.kwik;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

import tech.kwik.core.QuicConnection;
import tech.kwik.core.QuicStream;
import tech.kwik.core.log.NullLogger;
import tech.kwik.core.server.ApplicationProtocolConnection;
import tech.kwik.core.server.ApplicationProtocolConnectionFactory;
import tech.kwik.core.server.ServerConnectionConfig;
import tech.kwik.core.server.ServerConnector;

/** The server: answers each request stream with the named file from LL_WWW and FIN, or stores an upload. */
final class Server {
    private static final int CHUNK = 256 * 1024;
    /** A request line longer than this is refused rather than buffered without end. */
    private static final int MAX_LINE = 4096;

    private Server() {
    }

    static int serve(Endpoint.Opts o, Endpoint.AppLog applog) throws Exception {
        DatagramSocket socket = new DatagramSocket(new InetSocketAddress(InetAddress.getByName(o.addr()), o.port()));
        // 4 MiB socket buffers, as the other endpoints ask for: a burst is queued by the
        // emulated link, not dropped by our own socket.
        socket.setReceiveBufferSize(4 << 20);
        socket.setSendBufferSize(4 << 20);
        ServerConnectionConfig config = ServerConnectionConfig.builder()
                .maxIdleTimeoutInSeconds(30)
                .maxConnectionBufferSize(o.flowWindow())
                .maxBidirectionalStreamBufferSize(o.flowWindow())
                .maxOpenPeerInitiatedBidirectionalStreams(1000)
                .retryRequired(false)
                .build();
        ServerConnector server = withKey(ServerConnector.builder(), o.certs()).withSocket(socket)
                .withConfiguration(config).withLogger(new NullLogger()).build();
        server.registerApplicationProtocol(Endpoint.ALPN, new Factory(o, applog));
        CountDownLatch term = new CountDownLatch(1);
        // SIGTERM ends a server with exit 0 (the contract), not the JVM's 143.
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> term.countDown());
        server.start();
        System.out.println("{\"ready\": true}");
        System.out.flush();
        term.await();
        server.close();
        return 0;
    }

    /**
     * The run's certificate and key. kwik reads only RSA keys from PEM streams; the suite's
     * key is EC P-256 (PKCS#8), so it goes in through an in-memory key store, which kwik
     * takes with its curve's name.
     */
    private static ServerConnector.Builder withKey(ServerConnector.Builder b, Path certs) throws Exception {
        Path certPath = certs.resolve("cert.pem"), keyPath = certs.resolve("priv.key");
        String pem = Files.readString(keyPath, StandardCharsets.US_ASCII);
        String body = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        byte[] der = java.util.Base64.getDecoder().decode(body);
        java.security.PrivateKey key;
        try {
            key = java.security.KeyFactory.getInstance("EC").generatePrivate(new java.security.spec.PKCS8EncodedKeySpec(der));
        } catch (java.security.spec.InvalidKeySpecException notEc) {
            try (InputStream cert = new FileInputStream(certPath.toFile()); InputStream k = new FileInputStream(keyPath.toFile())) {
                return b.withCertificate(cert, k);
            }
        }
        java.security.cert.Certificate[] chain;
        try (InputStream in = Files.newInputStream(certPath)) {
            chain = java.security.cert.CertificateFactory.getInstance("X.509").generateCertificates(in)
                    .toArray(new java.security.cert.Certificate[0]);
        }
        char[] password = "longlook".toCharArray();
        java.security.KeyStore store = java.security.KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("server", key, password, chain);
        return b.withKeyStore(store, "server", password, "secp256r1");
    }

    /** One hq-interop connection: each client-initiated stream is a request, served on its own thread. */
    private record Factory(Endpoint.Opts o, Endpoint.AppLog applog) implements ApplicationProtocolConnectionFactory {
        @Override
        public ApplicationProtocolConnection createConnection(String protocol, QuicConnection connection) {
            connection.setDefaultBidirectionalStreamReceiveBufferSize(o.flowWindow());
            return new ApplicationProtocolConnection() {
                @Override
                public void acceptPeerInitiatedStream(QuicStream stream) {
                    Thread t = new Thread(() -> {
                        try {
                            if (o.upload()) {
                                store(o, applog, stream);
                            } else {
                                answer(o, applog, stream);
                            }
                        } catch (IOException | RuntimeException e) {
                            System.err.println("server: stream " + stream.getStreamId() + " failed: " + e);
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                }
            };
        }

        @Override
        public int maxConcurrentPeerInitiatedBidirectionalStreams() {
            return 1000;
        }
    }

    /** Bytes up to the first LF (the request line, without CR), and what followed it in `rest`. */
    private static String readLine(InputStream in, java.io.ByteArrayOutputStream rest) throws IOException {
        java.io.ByteArrayOutputStream line = new java.io.ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1 && c != '\n') {
            if (line.size() > MAX_LINE) {
                throw new IOException("request line too long");
            }
            line.write(c);
        }
        return line.toString(StandardCharsets.UTF_8).replace("\r", "").trim();
    }

    /** A plain name in LL_WWW: no separators, no `..`. */
    private static String name(String line, String method) throws IOException {
        if (!line.startsWith(method + " ")) {
            throw new IOException("not a " + method + " request: " + line);
        }
        String n = line.substring(method.length() + 1).trim();
        n = n.startsWith("/") ? n.substring(1) : n;
        if (n.isEmpty() || n.contains("/") || n.contains("\\") || n.equals("..") || n.equals(".")) {
            throw new IOException("file name " + n + " must be a plain name");
        }
        return n;
    }

    private static void answer(Endpoint.Opts o, Endpoint.AppLog applog, QuicStream stream) throws IOException {
        String n = name(readLine(stream.getInputStream(), null), "GET");
        Path path = o.www().resolve(n);
        long size = Files.size(path);
        applog.event("request_start", stream.getStreamId(), size);
        long sent = 0;
        try (InputStream file = Files.newInputStream(path); OutputStream out = stream.getOutputStream()) {
            byte[] buf = new byte[CHUNK];
            int got;
            while ((got = file.read(buf)) > 0) {
                out.write(buf, 0, got);
                sent += got;
            }
        }
        // kwik tells the application nothing of acknowledgements: the FIN is queued, not known delivered.
        applog.event("request_done", stream.getStreamId(), sent, false);
    }

    private static void store(Endpoint.Opts o, Endpoint.AppLog applog, QuicStream stream) throws IOException {
        InputStream in = stream.getInputStream();
        String n = name(readLine(in, null), "PUT");
        applog.event("request_start", stream.getStreamId(), 0);
        long stored = 0;
        try (OutputStream file = Files.newOutputStream(o.downloads().resolve(n))) {
            byte[] buf = new byte[CHUNK];
            int got;
            while ((got = in.read(buf)) > 0) {
                file.write(buf, 0, got);
                stored += got;
            }
        }
        applog.event("request_done", stream.getStreamId(), stored);
        stream.getOutputStream().close();
    }
}
