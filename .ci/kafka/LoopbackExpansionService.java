// Beam's Java expansion service (org.apache.beam.sdk.expansion.service.ExpansionService) bound to
// 127.0.0.1 only: ExpansionService.main binds every interface and has no option to choose one.
// The same services as ExpansionService.main (expansion + artifact retrieval). .ci/get_kafka.sh
// compiles it into <cache>/kafka-expansion/classes; run it as
//   java -cp '<cache>/kafka-expansion/classes:<cache>/kafka-expansion/lib/*' LoopbackExpansionService PORT [options]
// e.g. PORT --defaultEnvironmentType=EMBEDDED --experiments=use_deprecated_read
import java.net.InetSocketAddress;
import java.util.Arrays;
import org.apache.beam.runners.fnexecution.artifact.ArtifactRetrievalService;
import org.apache.beam.sdk.expansion.service.ExpansionService;
import org.apache.beam.sdk.expansion.service.ExpansionServiceOptions;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.vendor.grpc.v1p69p0.io.grpc.Server;
import org.apache.beam.vendor.grpc.v1p69p0.io.grpc.netty.NettyServerBuilder;

public class LoopbackExpansionService {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    PipelineOptionsFactory.register(ExpansionServiceOptions.class);
    PipelineOptions options =
        PipelineOptionsFactory.fromArgs(Arrays.copyOfRange(args, 1, args.length)).create();
    ExpansionService service = new ExpansionService(options, "localhost:" + port);
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
            .addService(service)
            .addService(new ArtifactRetrievalService())
            .build()
            .start();
    System.out.println("expansion service listening on 127.0.0.1:" + port);
    server.awaitTermination();
  }
}
