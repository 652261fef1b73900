import NotesCommand

await Notes.main()
