/// The FlakeNotes release: one number for `notes --version`, `notesyncd --version` and `GET /v1/info`.
public enum FlakeNotesVersion {
    public static let current = "0.1.0"
}
