import java.util.ArrayList;
import java.util.List;

import org.spdx.tools.SpdxToolsHelper;
import org.spdx.tools.SpdxVerificationException;
import org.spdx.tools.Verify;

/**
 * The SPDX project's tools-java verifier (org.spdx:tools-java, Maven Central) over many files in
 * one JVM: for each file, Verify.verify(file, JSONLD), the call `java -jar tools-java.jar Verify
 * FILE JSONLD` makes, with the same verdict (messages about deprecated licences are warnings, any
 * other message or an exception makes the file invalid). Prints `valid <file>` or
 * `invalid <file>: <first problem>` per file; exits 0 when all are valid, 1 otherwise. Built against
 * the jar by hack/ensure-verifiers.sh.
 */
public class SpdxVerifyAll {
  public static void main(String[] args) {
    SpdxToolsHelper.initialize();
    boolean ok = true;
    for (String file : args) {
      List<String> errors = new ArrayList<>();
      try {
        for (String msg : Verify.verify(file, SpdxToolsHelper.SerFileType.JSONLD)) {
          if (!msg.contains(" is deprecated.")) errors.add(msg);
        }
      } catch (SpdxVerificationException e) {
        errors.add(e.getMessage());
      }
      if (errors.isEmpty()) {
        System.out.println("valid " + file);
      } else {
        ok = false;
        System.out.println("invalid " + file + ": " + errors.get(errors.size() - 1).replace('\n', ' '));
      }
    }
    System.exit(ok ? 0 : 1);
  }
}
