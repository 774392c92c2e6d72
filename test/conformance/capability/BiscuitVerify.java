// Independent Biscuit verifier for the conformance tests: the Java implementation
// (org.biscuitsec:biscuit 4.0.1, from Maven Central), which shares no code with the Rust core that
// @biscuit-auth/biscuit-wasm wraps. Built at test-install time by hack/ensure-verifiers.sh.
//
// Usage: BiscuitVerify <root public key hex (ed25519)> <token, base64url> <authorizer file>
// The authorizer file holds Datalog statements, one per line, each ending in ';': `allow if` and
// `deny if` lines are policies, `check if` lines checks, everything else facts.
// Prints `OK <policy index>` and exits 0 when the signature chain verifies and an allow policy
// matches; prints `FAIL <reason>` and exits 1 otherwise (2 for usage errors).
import biscuit.format.schema.Schema;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.biscuitsec.biscuit.crypto.PublicKey;
import org.biscuitsec.biscuit.datalog.RunLimits;
import org.biscuitsec.biscuit.token.Authorizer;
import org.biscuitsec.biscuit.token.Biscuit;

public final class BiscuitVerify {
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.out.println("FAIL usage: BiscuitVerify <root hex> <token> <authorizer file>");
      System.exit(2);
    }
    try {
      PublicKey root = new PublicKey(Schema.PublicKey.Algorithm.Ed25519, args[0]);
      Biscuit token = Biscuit.from_b64url(args[1], root);
      Authorizer authorizer = token.authorizer();
      for (String raw : Files.readAllLines(Path.of(args[2]))) {
        String line = raw.trim();
        if (line.isEmpty()) continue;
        if (line.endsWith(";")) line = line.substring(0, line.length() - 1);
        if (line.startsWith("allow if") || line.startsWith("deny if")) authorizer.add_policy(line);
        else if (line.startsWith("check if")) authorizer.add_check(line);
        else authorizer.add_fact(line);
      }
      // A cold JVM needs more than the default budget; time is not what this checks.
      Long policy = authorizer.authorize(new RunLimits(1000, 100, Duration.ofSeconds(10)));
      System.out.println("OK " + policy);
    } catch (Exception e) {
      System.out.println("FAIL " + e);
      System.exit(1);
    }
  }
}
