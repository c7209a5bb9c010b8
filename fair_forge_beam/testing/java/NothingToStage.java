// A PipelineResourcesDetector.Factory whose detector finds nothing: a Beam Java job server given
// --pipelineResourcesDetectorFactoryClass=fair_forge_beam.flink.NothingToStage attaches no jars
// to its jobs. Compiled and used by fair_forge_beam/testing/flink_cluster.py (see its module
// docstring): Beam's FlinkJobInvoker attaches every jar of the job server's own classpath to each
// Flink job, which uploads them to the JobManager's blob server and every TaskManager, although
// the cluster has them on its own classpath (FlinkCluster(share_classpath=True)).
package fair_forge_beam.flink;

import java.util.Collections;
import org.apache.beam.sdk.util.construction.resources.PipelineResourcesDetector;

public final class NothingToStage implements PipelineResourcesDetector.Factory {
  /** Beam's InstanceBuilder makes the factory through this method. */
  public static NothingToStage create() {
    return new NothingToStage();
  }

  @Override
  public PipelineResourcesDetector getPipelineResourcesDetector() {
    return classLoader -> Collections.emptyList();
  }
}
