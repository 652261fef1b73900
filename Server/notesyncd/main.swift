import NoteSyncServer

await NotesyncdCommand.runFromCommandLine()
