import NoteSim

await NoteSimCommand.runFromCommandLine()
